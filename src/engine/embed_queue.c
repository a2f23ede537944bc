/* embed_queue.c: scheduler threads (lanes, see below) on one mutex +
 * condvar queue of jobs per encoder model, batches packed greedily in
 * arrival order.
 *
 * Packing takes whole sequences from the oldest job first, so a large
 * request cannot starve small ones behind it for more than its own size, and
 * no sequence is split. A job's sequences may span several batches. Vectors are
 * normalized here, per job, so jobs with and without normalization share a
 * batch; so do jobs that want every token's vector (a pass's output rows are
 * laid out per sequence, one pooled row or one per token). Rejected: a fixed
 * wait window to "collect" a batch (adds its full length to every request
 * when the server is idle).
 *
 * Restarts: a batch is whatever was queued when the lane came free. Under
 * steady load from clients that each wait for their answer, they fall into
 * two groups that take turns (those answered by one pass come back while the
 * next runs), and every pass pays the fixed cost of a pass (reading all the
 * weights from memory, waking the pool) for half the sequences: at 1
 * sentence per request and 8 connections, MiniLM on the Zen 5 ran batches
 * of 1-8, mostly 3-5. A pass's time is about c0 + c1 * tokens; with new work
 * queued, going on costs what is left of this pass plus c0 + c1 * new for
 * the next, starting over costs c0 + c1 * (tokens + new): starting over wins
 * by c0 - e, e the time already spent. So a pass asks between layers; the
 * answer is yes when e < c0, the sequences that arrived since would, packed
 * as pick_batch packs them, at least double its tokens, and the batch has
 * been restarted fewer than RESTART_MAX times (the bound on what the first
 * requests can lose). The scheduler then unpicks its sequences and packs
 * again, old ones first. No request waits for anything: the first starts at
 * once, later ones join. c0 and c1 are fitted to recent passes (pass_fit.h;
 * given-up passes counted at their pace so far); no restarts until the fit
 * has seen passes of different sizes. Without the doubling (any new work
 * when e < c0) a third of the passes were given up and the gain was a third
 * as large; with the doubling and "in the first sixth of the pass" in place
 * of e < c0, passes of 100+ tokens were restarted too and 8 sentences per
 * request lost 9%. Measured on MiniLM (bench/RESULTS.md): at 1 sentence per
 * request passes of mostly 7-8, sentences/s +9.6% (8 interleaved rounds, all
 * better); at 8 per request a few restarts per thousand sequences.
 *
 * Lanes: a queue may have several scheduler threads (lanes), each with
 * its own compute argument (in the server: its own share of the compute
 * threads), running passes at the same time from the one queue. On the
 * 2-core Zen 5, two one-thread lanes served MiniLM +5% at 1 sentence per
 * request and +14% at 8 against one two-thread lane (interleaved rounds,
 * bench/RESULTS.md 2026-12-02): a one-thread pass has no barriers between
 * its steps and no activations crossing cores, a core the hypervisor takes
 * away stalls one pass instead of both, and one lane computes while the
 * other answers. Rules: a lane picking while others wait takes its share
 * (1 / (waiting + 1) of the queued tokens) and wakes one; a pass is not
 * restarted while a lane waits (that lane takes the new work) nor when
 * another lane picked sequences of its jobs after it (its unpick would
 * hand them out twice); a job's sequences may be split across lanes and
 * the job completes when the last comes back. A lone request (every other
 * lane waiting, nothing else queued) runs wide, on every thread
 * (hearth_embed_queue_set_wide), so one lane per thread costs an idle
 * server no latency (MiniLM, 1 connection: p50 2.6 ms, 3.3 ms without); the
 * other lanes start nothing until it ends. */
#include "embed_queue.h"
#include "pass_fit.h"

#include "base/clock.h"
#include "base/log.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RESTART_MAX 6

/* One scheduler thread and what it alone touches: the batch it is forming
 * or running, and its fit of the pass cost. */
typedef struct lane {
    hearth_embed_queue *q;
    void *model;       /* the compute callback's first argument */
    pthread_t thread;
    /* batch scratch, grown as needed */
    const int32_t **b_ids;
    int32_t *b_lens;
    hearth_embed_job **b_job;
    int *b_index;
    bool *b_all;       /* per sequence: its job wants every token's vector */
    size_t *b_row;     /* per sequence: its first row in b_out */
    float *b_out;      /* b_out_rows x dim */
    size_t b_out_rows;
    int b_cap;
    int b_n;           /* sequences in the batch running */
    size_t b_tokens;   /* of the batch running */
    uint64_t b_t0;     /* when its pass started */
    int b_restarts;    /* times the batch being formed was given up */
    bool b_gave_up;    /* restart_check said yes to the pass running */
    double b_c0;       /* c0_ns when the pass started */
    hearth_pass_fit fit;
} lane;

struct hearth_embed_queue {
    hearth_embed_compute_fn compute;
    int64_t dim;
    size_t max_batch_tokens;
    int max_jobs;
    lane *lanes;
    int n_lanes, n_started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* the rest under the lock */
    hearth_embed_job *head, *tail;
    int queued;
    int n_idle;        /* lanes waiting for work */
    void *wide_model;  /* compute's argument for a pass on every thread, or NULL */
    bool wide_running; /* a wide pass runs: the other lanes wait */
    bool stopping;
    hearth_embed_queue_stats stats;
    double c0_ns;      /* hearth_pass_fit_c0 after the last pass of any lane, or the pinned value */
    bool c0_pinned;
};

static void l2_normalize(float *v, int64_t n)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)v[i] * v[i];
    if (ss <= 0)
        return;
    float inv = (float)(1.0 / sqrt(ss));
    for (int64_t i = 0; i < n; i++)
        v[i] *= inv;
}

static bool grow(lane *q, int need)
{
    if (need <= q->b_cap)
        return true;
    int cap = q->b_cap ? q->b_cap * 2 : 64;
    while (cap < need)
        cap *= 2;
    const int32_t **ids = realloc(q->b_ids, (size_t)cap * sizeof *ids);
    if (ids)
        q->b_ids = ids;
    int32_t *lens = realloc(q->b_lens, (size_t)cap * sizeof *lens);
    if (lens)
        q->b_lens = lens;
    hearth_embed_job **job = realloc(q->b_job, (size_t)cap * sizeof *job);
    if (job)
        q->b_job = job;
    int *index = realloc(q->b_index, (size_t)cap * sizeof *index);
    if (index)
        q->b_index = index;
    bool *all = realloc(q->b_all, (size_t)cap * sizeof *all);
    if (all)
        q->b_all = all;
    size_t *row = realloc(q->b_row, (size_t)cap * sizeof *row);
    if (row)
        q->b_row = row;
    if (!ids || !lens || !job || !index || !all || !row)
        return false;
    q->b_cap = cap;
    return true;
}

/* Lays out the picked batch's output rows (a pooled sequence one, an
 * all-tokens one a row per token) and grows b_out to hold them. Returns
 * whether any sequence wants all its tokens, or -1 when out of memory. */
static int layout_out(lane *e, int n)
{
    size_t rows = 0;
    int any = 0;
    for (int i = 0; i < n; i++) {
        e->b_all[i] = e->b_job[i]->all_tokens;
        e->b_row[i] = rows;
        rows += e->b_all[i] ? (size_t)e->b_lens[i] : 1;
        any |= e->b_all[i];
    }
    if (rows > e->b_out_rows) {
        size_t cap = e->b_out_rows ? e->b_out_rows : 64;
        while (cap < rows)
            cap *= 2;
        float *out = realloc(e->b_out, cap * (size_t)e->q->dim * sizeof *out);
        if (!out)
            return -1;
        e->b_out = out;
        e->b_out_rows = cap;
    }
    return any;
}

/* Removes job from the queue (the lock is held). */
static void unlink_job(hearth_embed_queue *q, hearth_embed_job *job)
{
    hearth_embed_job **p = &q->head;
    hearth_embed_job *prev = NULL;
    while (*p && *p != job) {
        prev = *p;
        p = &(*p)->link;
    }
    if (!*p)
        return;
    *p = job->link;
    if (q->tail == job)
        q->tail = prev;
    q->queued--;
}

/* Whether more of job's sequences may be scheduled: not when it was
 * cancelled, nor when a pass of it failed (with several lanes the rest of
 * a job can still be queued then; it completes, failed, once what is in
 * flight is back). */
static bool schedulable(const hearth_embed_job *job)
{
    return !atomic_load(&job->cancelled) && job->status == 0;
}

/* Tokens of the sequences not yet scheduled, counted up to cap (the lock is
 * held). */
static size_t queued_tokens(const hearth_embed_queue *q, size_t cap)
{
    size_t tokens = 0;
    for (const hearth_embed_job *job = q->head; job && tokens < cap; job = job->link)
        for (int i = job->next; i < job->n && tokens < cap && schedulable(job); i++)
            tokens += (size_t)job->lens[i];
    return tokens;
}

/* Whether a lane has something to do (the lock is held): a sequence to
 * schedule, or a cancelled job with nothing in flight to drop. Jobs stay
 * queued while their sequences are in flight; a lane that woke for
 * those alone would find no batch and, waiting on the queue's head as it
 * did, spin on the lock for the rest of the other lane's pass. */
static bool has_work(const hearth_embed_queue *q)
{
    for (const hearth_embed_job *job = q->head; job; job = job->link)
        if ((job->next < job->n && schedulable(job)) || (atomic_load(&job->cancelled) && job->finished == job->next))
            return true;
    return false;
}

/* Picks e's next batch under the lock; returns its sequence count and sets
 * b_tokens. Jobs that are cancelled or fully scheduled are moved to
 * *finished (linked by link). With other lanes waiting, the batch is this
 * lane's share of what is queued (see "Lanes"), at least one sequence. */
static int pick_batch(lane *e, hearth_embed_job **finished)
{
    hearth_embed_queue *q = e->q;
    size_t budget = q->max_batch_tokens;
    if (q->n_idle > 0) {
        size_t ways = (size_t)q->n_idle + 1, avail = queued_tokens(q, budget * ways);
        budget = (avail + ways - 1) / ways < budget ? (avail + ways - 1) / ways : budget;
    }
    int n = 0;
    e->b_tokens = 0;
    hearth_embed_job *job = q->head;
    while (job) {
        hearth_embed_job *next = job->link;
        if (atomic_load(&job->cancelled) && job->finished == job->next) {
            /* nothing of it is in flight: drop it now */
            unlink_job(q, job);
            job->status = HEARTH_ENOTFOUND;
            job->link = *finished;
            *finished = job;
            job = next;
            continue;
        }
        while (job->next < job->n && schedulable(job)) {
            size_t len = (size_t)job->lens[job->next];
            if (n > 0 && e->b_tokens + len > budget)
                return n;
            if (!grow(e, n + 1))
                return n;
            e->b_ids[n] = job->ids[job->next];
            e->b_lens[n] = job->lens[job->next];
            e->b_job[n] = job;
            e->b_index[n] = job->next;
            job->next++;
            n++;
            e->b_tokens += len;
        }
        job = next;
    }
    return n;
}

/* Whether unpick(e, all) would be right (the lock is held): no lane has
 * picked sequences of e's jobs after e's, so each job's run in the batch
 * still ends where the job's next is. */
static bool unpickable(const lane *e)
{
    int n = e->b_n;
    for (int i = 0; i < n; i++)
        if ((i + 1 == n || e->b_job[i + 1] != e->b_job[i]) && e->b_job[i]->next != e->b_index[i] + 1)
            return false;
    return true;
}

/* hearth_embed_restart's check: see "Restarts" at the top. Walks the
 * sequences not yet scheduled in pick_batch's order and budget. */
static bool restart_check(void *ctx, int64_t done, int64_t total)
{
    lane *e = ctx;
    hearth_embed_queue *q = e->q;
    double spent = (double)(hearth_now_ns() - e->b_t0);
    if (e->b_restarts >= RESTART_MAX || spent >= e->b_c0)
        return false;
    size_t tokens = e->b_tokens, added = 0;
    pthread_mutex_lock(&q->lock);
    if (q->n_idle > 0 || !unpickable(e)) {
        pthread_mutex_unlock(&q->lock);
        return false;
    }
    for (hearth_embed_job *job = q->head; job && added < e->b_tokens; job = job->link) {
        if (!schedulable(job))
            continue;
        for (int i = job->next; i < job->n && added < e->b_tokens; i++) {
            size_t len = (size_t)job->lens[i];
            if (tokens + len > q->max_batch_tokens)
                goto out;
            tokens += len;
            added += len;
        }
    }
out:
    pthread_mutex_unlock(&q->lock);
    if (added < e->b_tokens)
        return false;
    e->b_gave_up = true;
    hearth_pass_fit_add(&e->fit, (double)e->b_tokens, spent * (double)total / (double)done); /* at its pace so far */
    return true;
}

/* Puts the batch's sequences back (the lock is held): each job's picked
 * sequences are a run from its old next. */
static void unpick(lane *e, int n)
{
    for (int i = 0; i < n; i++)
        if (e->b_job[i]->next > e->b_index[i])
            e->b_job[i]->next = e->b_index[i];
}

static void finish_jobs(hearth_embed_queue *q, hearth_embed_job *list)
{
    while (list) {
        hearth_embed_job *next = list->link;
        int st = list->status;
        if (st == HEARTH_OK && atomic_load(&list->cancelled))
            st = HEARTH_ENOTFOUND;
        pthread_mutex_lock(&q->lock);
        if (st == HEARTH_OK)
            q->stats.jobs_done++;
        else if (st == HEARTH_ENOTFOUND)
            q->stats.jobs_cancelled++;
        else
            q->stats.jobs_failed++;
        pthread_mutex_unlock(&q->lock);
        list->done(list, st, st == HEARTH_ENOTFOUND ? "cancelled" : st ? "the forward pass failed" : NULL);
        list = next;
    }
}

/* Hands the pass's results to their jobs (the lock is held): vectors copied
 * into place (pooled ones normalized when the job asks), or the failure
 * recorded; returns the jobs now complete, unlinked from the queue. */
static hearth_embed_job *deliver(lane *e, int n, int rc)
{
    hearth_embed_queue *q = e->q;
    size_t dim = (size_t)q->dim;
    hearth_embed_job *finished = NULL;
    for (int i = 0; i < n; i++) {
        hearth_embed_job *job = e->b_job[i];
        int at = e->b_index[i];
        if (rc) {
            job->status = rc;
        } else {
            size_t rows = e->b_all[i] ? (size_t)e->b_lens[i] : 1;
            float *dst = job->out + (e->b_all[i] ? job->rows[at] : (size_t)at) * dim;
            memcpy(dst, e->b_out + e->b_row[i] * dim, rows * dim * sizeof(float));
            if (!e->b_all[i] && job->normalize)
                l2_normalize(dst, q->dim);
        }
        job->finished++;
        /* complete when every sequence is back, or when nothing more will be scheduled
         * (a failure or a cancellation) and what was scheduled is back */
        bool complete = job->finished == job->n || (job->finished == job->next && !schedulable(job));
        if (complete && !job->completed) {
            job->completed = true;
            unlink_job(q, job);
            job->link = finished;
            finished = job;
        }
    }
    return finished;
}

static void *scheduler(void *arg)
{
    lane *e = arg;
    hearth_embed_queue *q = e->q;
    for (;;) {
        hearth_embed_job *finished = NULL;
        pthread_mutex_lock(&q->lock);
        q->n_idle++;
        while (!q->stopping && (!has_work(q) || q->wide_running))
            pthread_cond_wait(&q->wake, &q->lock);
        q->n_idle--;
        if (q->stopping) {
            pthread_mutex_unlock(&q->lock);
            break;
        }
        int n = e->b_n = pick_batch(e, &finished);
        bool left = queued_tokens(q, 1) > 0;
        if (q->n_idle > 0 && left)
            pthread_cond_signal(&q->wake); /* the rest is another lane's */
        e->b_c0 = q->c0_ns;
        /* alone with nothing else queued: the pass takes every thread */
        bool wide = n > 0 && q->wide_model && q->n_idle == q->n_lanes - 1 && !left;
        q->wide_running = wide;
        pthread_mutex_unlock(&q->lock);
        finish_jobs(q, finished);
        finished = NULL;
        if (n == 0)
            continue;
        hearth_err err = {0};
        e->b_gave_up = false;
        const hearth_embed_restart restart = {restart_check, e};
        int any_all = layout_out(e, n);
        uint64_t t0 = e->b_t0 = hearth_now_ns();
        int rc = any_all < 0 ? hearth_err_set(&err, HEARTH_ENOMEM, "out of memory for the vectors of %d sequences", n)
                             : q->compute(wide ? q->wide_model : e->model, n, e->b_ids, e->b_lens,
                                          any_all ? e->b_all : NULL, e->b_out,
                                          e->b_c0 > 0 && !wide ? &restart : NULL, &err);
        uint64_t t1 = hearth_now_ns();
        if (wide) {
            pthread_mutex_lock(&q->lock);
            q->wide_running = false;
            pthread_cond_broadcast(&q->wake); /* work that arrived meanwhile */
            pthread_mutex_unlock(&q->lock);
        }
        if (rc == 0 && !wide) /* the fit is of this lane's own passes */
            hearth_pass_fit_add(&e->fit, (double)e->b_tokens, (double)(t1 - t0));
        double c0 = hearth_pass_fit_c0(&e->fit);
        if (rc == HEARTH_EAGAIN && e->b_gave_up) {
            pthread_mutex_lock(&q->lock);
            if (!q->c0_pinned)
                q->c0_ns = c0;
            unpick(e, n);
            q->stats.restarts++;
            q->stats.busy_ns += t1 - t0;
            pthread_mutex_unlock(&q->lock);
            e->b_restarts++;
            continue;
        }
        e->b_restarts = 0;
        if (rc == HEARTH_EAGAIN)
            hearth_err_set(&err, rc, "the forward pass stopped unasked");
        if (rc)
            HLOG_ERROR("embedding batch of %d sequences failed: %s", n, err.msg);
        pthread_mutex_lock(&q->lock);
        finished = deliver(e, n, rc);
        q->stats.batches++;
        q->stats.sequences += (uint64_t)n;
        q->stats.tokens += e->b_tokens;
        if (!q->c0_pinned)
            q->c0_ns = c0;
        q->stats.busy_ns += t1 - t0;
        pthread_mutex_unlock(&q->lock);
        finish_jobs(q, finished);
    }
    return NULL;
}

static void free_lane(lane *e)
{
    free(e->b_ids);
    free(e->b_lens);
    free(e->b_job);
    free(e->b_index);
    free(e->b_out);
    free(e->b_all);
    free(e->b_row);
}

hearth_embed_queue *hearth_embed_queue_new_lanes(hearth_embed_compute_fn compute, void *const *models,
                                                   int n_lanes, int64_t dim, size_t max_batch_tokens, int max_jobs,
                                                   hearth_err *err)
{
    if (dim <= 0 || max_batch_tokens == 0 || max_jobs <= 0 || n_lanes < 1 || n_lanes > HEARTH_EMBED_LANES_MAX) {
        hearth_err_set(err, HEARTH_EINVAL,
                       "embed queue: dim %lld, max batch tokens %zu, max jobs %d must be positive, lanes %d in 1..%d",
                       (long long)dim, max_batch_tokens, max_jobs, n_lanes, HEARTH_EMBED_LANES_MAX);
        return NULL;
    }
    hearth_embed_queue *q = calloc(1, sizeof *q);
    lane *lanes = q ? calloc((size_t)n_lanes, sizeof *lanes) : NULL;
    if (!lanes) {
        free(q);
        hearth_err_set(err, HEARTH_ENOMEM, "embed queue: out of memory");
        return NULL;
    }
    q->compute = compute;
    q->dim = dim;
    q->max_batch_tokens = max_batch_tokens;
    q->max_jobs = max_jobs;
    q->lanes = lanes;
    q->n_lanes = n_lanes;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->wake, NULL);
    for (int i = 0; i < n_lanes; i++) {
        lanes[i] = (lane){.q = q, .model = models[i]};
        if (pthread_create(&lanes[i].thread, NULL, scheduler, &lanes[i]) != 0) {
            hearth_err_set(err, HEARTH_EIO, "embed queue: cannot start scheduler thread %d of %d", i + 1, n_lanes);
            hearth_embed_queue_free(q);
            return NULL;
        }
        q->n_started++;
    }
    return q;
}

void hearth_embed_queue_set_wide(hearth_embed_queue *q, void *wide_model)
{
    pthread_mutex_lock(&q->lock);
    q->wide_model = q->n_lanes > 1 ? wide_model : NULL;
    pthread_mutex_unlock(&q->lock);
}

hearth_embed_queue *hearth_embed_queue_new(hearth_embed_compute_fn compute, void *model, int64_t dim,
                                           size_t max_batch_tokens, int max_jobs, hearth_err *err)
{
    return hearth_embed_queue_new_lanes(compute, &model, 1, dim, max_batch_tokens, max_jobs, err);
}

void hearth_embed_queue_free(hearth_embed_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->stopping = true;
    pthread_cond_broadcast(&q->wake);
    pthread_mutex_unlock(&q->lock);
    for (int i = 0; i < q->n_started; i++)
        pthread_join(q->lanes[i].thread, NULL);
    hearth_embed_job *job = q->head;
    while (job) {
        hearth_embed_job *next = job->link;
        job->done(job, HEARTH_ENOTFOUND, "the server is shutting down");
        job = next;
    }
    for (int i = 0; i < q->n_lanes; i++)
        free_lane(&q->lanes[i]);
    free(q->lanes);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->wake);
    free(q);
}

int hearth_embed_queue_submit(hearth_embed_queue *q, hearth_embed_job *job)
{
    if (job->n <= 0)
        return HEARTH_EINVAL;
    job->next = job->finished = 0;
    job->status = 0;
    job->completed = false;
    job->link = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->queued >= q->max_jobs || q->stopping) {
        pthread_mutex_unlock(&q->lock);
        return HEARTH_ELIMIT;
    }
    if (q->tail)
        q->tail->link = job;
    else
        q->head = job;
    q->tail = job;
    q->queued++;
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->lock);
    return HEARTH_OK;
}

void hearth_embed_queue_pin_pass_cost(hearth_embed_queue *q, int64_t ns)
{
    pthread_mutex_lock(&q->lock);
    q->c0_pinned = ns >= 0;
    if (ns >= 0)
        q->c0_ns = (double)ns;
    pthread_mutex_unlock(&q->lock);
}

void hearth_embed_queue_get_stats(hearth_embed_queue *q, hearth_embed_queue_stats *out)
{
    pthread_mutex_lock(&q->lock);
    *out = q->stats;
    out->queued_jobs = q->queued;
    out->pass_fixed_ns = q->c0_ns;
    pthread_mutex_unlock(&q->lock);
}
