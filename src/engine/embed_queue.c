/* embed_queue.c: one scheduler thread per encoder model, a mutex + condvar
 * queue of jobs, batches packed greedily in arrival order.
 *
 * Packing takes whole sequences from the oldest job first, so a large
 * request cannot starve small ones behind it for more than its own size, and
 * no sequence is split. A job's sequences may span several batches. Vectors are
 * normalized here, per job, so jobs with and without normalization share a
 * batch. Rejected: a fixed wait window to "collect" a batch (adds its full
 * length to every request when the server is idle).
 *
 * Restarts: a batch is whatever was queued when the engine came free. Under
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
 * better); at 8 per request a few restarts per thousand sequences. */
#include "embed_queue.h"
#include "pass_fit.h"

#include "base/clock.h"
#include "base/log.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RESTART_MAX 6

struct hearth_embed_queue {
    hearth_embed_compute_fn compute;
    void *model;
    int64_t dim;
    size_t max_batch_tokens;
    int max_jobs;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    hearth_embed_job *head, *tail;
    int queued;
    bool stopping;
    hearth_embed_queue_stats stats;
    /* batch scratch, grown as needed, used by the scheduler thread only */
    const int32_t **b_ids;
    int32_t *b_lens;
    hearth_embed_job **b_job;
    int *b_index;
    float *b_out;
    int b_cap;
    size_t b_tokens;   /* of the batch running */
    uint64_t b_t0;     /* when its pass started */
    int b_restarts;    /* times the batch being formed was given up */
    bool b_gave_up;    /* restart_check said yes to the pass running */
    double b_c0;       /* c0_ns when the pass started */
    hearth_pass_fit fit; /* scheduler thread only */
    double c0_ns;      /* under the lock: hearth_pass_fit_c0 after the last pass, or the pinned value */
    bool c0_pinned;    /* under the lock */
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

static bool grow(hearth_embed_queue *q, int need)
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
    float *out = realloc(q->b_out, (size_t)cap * (size_t)q->dim * sizeof *out);
    if (out)
        q->b_out = out;
    if (!ids || !lens || !job || !index || !out)
        return false;
    q->b_cap = cap;
    return true;
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

/* Picks the next batch under the lock; returns its sequence count and sets
 * b_tokens. Jobs that are cancelled or fully scheduled are moved to
 * *finished (linked by link). */
static int pick_batch(hearth_embed_queue *q, hearth_embed_job **finished)
{
    int n = 0;
    q->b_tokens = 0;
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
        while (job->next < job->n && !atomic_load(&job->cancelled)) {
            size_t len = (size_t)job->lens[job->next];
            if (n > 0 && q->b_tokens + len > q->max_batch_tokens)
                return n;
            if (!grow(q, n + 1))
                return n;
            q->b_ids[n] = job->ids[job->next];
            q->b_lens[n] = job->lens[job->next];
            q->b_job[n] = job;
            q->b_index[n] = job->next;
            job->next++;
            n++;
            q->b_tokens += len;
        }
        job = next;
    }
    return n;
}

/* hearth_embed_restart's check: see "Restarts" at the top. Walks the
 * sequences not yet scheduled in pick_batch's order and budget. */
static bool restart_check(void *ctx, int64_t done, int64_t total)
{
    hearth_embed_queue *q = ctx;
    double spent = (double)(hearth_now_ns() - q->b_t0);
    if (q->b_restarts >= RESTART_MAX || spent >= q->b_c0)
        return false;
    size_t tokens = q->b_tokens, added = 0;
    pthread_mutex_lock(&q->lock);
    for (hearth_embed_job *job = q->head; job && added < q->b_tokens; job = job->link) {
        if (atomic_load(&job->cancelled))
            continue;
        for (int i = job->next; i < job->n && added < q->b_tokens; i++) {
            size_t len = (size_t)job->lens[i];
            if (tokens + len > q->max_batch_tokens)
                goto out;
            tokens += len;
            added += len;
        }
    }
out:
    pthread_mutex_unlock(&q->lock);
    if (added < q->b_tokens)
        return false;
    q->b_gave_up = true;
    hearth_pass_fit_add(&q->fit, (double)q->b_tokens, spent * (double)total / (double)done); /* at its pace so far */
    return true;
}

/* Puts the batch's sequences back (the lock is held): each job's picked
 * sequences are a run from its old next. */
static void unpick(hearth_embed_queue *q, int n)
{
    for (int i = 0; i < n; i++)
        if (q->b_job[i]->next > q->b_index[i])
            q->b_job[i]->next = q->b_index[i];
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

static void *scheduler(void *arg)
{
    hearth_embed_queue *q = arg;
    for (;;) {
        hearth_embed_job *finished = NULL;
        pthread_mutex_lock(&q->lock);
        while (!q->stopping && !q->head)
            pthread_cond_wait(&q->wake, &q->lock);
        if (q->stopping) {
            pthread_mutex_unlock(&q->lock);
            break;
        }
        int n = pick_batch(q, &finished);
        q->b_c0 = q->c0_ns;
        pthread_mutex_unlock(&q->lock);
        finish_jobs(q, finished);
        finished = NULL;
        if (n == 0)
            continue;
        hearth_err err = {0};
        q->b_gave_up = false;
        const hearth_embed_restart restart = {restart_check, q};
        uint64_t t0 = q->b_t0 = hearth_now_ns();
        int rc = q->compute(q->model, n, q->b_ids, q->b_lens, q->b_out, q->b_c0 > 0 ? &restart : NULL, &err);
        uint64_t t1 = hearth_now_ns();
        if (rc == 0)
            hearth_pass_fit_add(&q->fit, (double)q->b_tokens, (double)(t1 - t0));
        double c0 = hearth_pass_fit_c0(&q->fit);
        if (rc == HEARTH_EAGAIN && q->b_gave_up) {
            pthread_mutex_lock(&q->lock);
            if (!q->c0_pinned)
                q->c0_ns = c0;
            unpick(q, n);
            q->stats.restarts++;
            q->stats.busy_ns += t1 - t0;
            pthread_mutex_unlock(&q->lock);
            q->b_restarts++;
            continue;
        }
        q->b_restarts = 0;
        if (rc == HEARTH_EAGAIN)
            hearth_err_set(&err, rc, "the forward pass stopped unasked");
        if (rc)
            HLOG_ERROR("embedding batch of %d sequences failed: %s", n, err.msg);
        pthread_mutex_lock(&q->lock);
        for (int i = 0; i < n; i++) {
            hearth_embed_job *job = q->b_job[i];
            if (rc) {
                job->status = rc;
            } else {
                float *dst = job->out + (size_t)q->b_index[i] * (size_t)q->dim;
                memcpy(dst, q->b_out + (size_t)i * (size_t)q->dim, (size_t)q->dim * sizeof(float));
                if (job->normalize)
                    l2_normalize(dst, q->dim);
            }
            job->finished++;
            /* complete when every sequence is back, or when nothing more will be scheduled
             * (a failure or a cancellation) and what was scheduled is back */
            bool complete = job->finished == job->n ||
                            (job->finished == job->next && (rc || atomic_load(&job->cancelled)));
            if (rc)
                job->status = rc;
            if (complete && !job->completed) {
                job->completed = true;
                unlink_job(q, job);
                job->link = finished;
                finished = job;
            }
        }
        q->stats.batches++;
        q->stats.sequences += (uint64_t)n;
        q->stats.tokens += q->b_tokens;
        if (!q->c0_pinned)
            q->c0_ns = c0;
        q->stats.busy_ns += t1 - t0;
        pthread_mutex_unlock(&q->lock);
        finish_jobs(q, finished);
    }
    return NULL;
}

hearth_embed_queue *hearth_embed_queue_new(hearth_embed_compute_fn compute, void *model, int64_t dim,
                                           size_t max_batch_tokens, int max_jobs, hearth_err *err)
{
    if (dim <= 0 || max_batch_tokens == 0 || max_jobs <= 0) {
        hearth_err_set(err, HEARTH_EINVAL, "embed queue: dim %lld, max batch tokens %zu, max jobs %d must be positive",
                       (long long)dim, max_batch_tokens, max_jobs);
        return NULL;
    }
    hearth_embed_queue *q = calloc(1, sizeof *q);
    if (!q) {
        hearth_err_set(err, HEARTH_ENOMEM, "embed queue: out of memory");
        return NULL;
    }
    q->compute = compute;
    q->model = model;
    q->dim = dim;
    q->max_batch_tokens = max_batch_tokens;
    q->max_jobs = max_jobs;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->wake, NULL);
    if (pthread_create(&q->thread, NULL, scheduler, q) != 0) {
        hearth_err_set(err, HEARTH_EIO, "embed queue: cannot start the scheduler thread");
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->wake);
        free(q);
        return NULL;
    }
    return q;
}

void hearth_embed_queue_free(hearth_embed_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->stopping = true;
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    hearth_embed_job *job = q->head;
    while (job) {
        hearth_embed_job *next = job->link;
        job->done(job, HEARTH_ENOTFOUND, "the server is shutting down");
        job = next;
    }
    free(q->b_ids);
    free(q->b_lens);
    free(q->b_job);
    free(q->b_index);
    free(q->b_out);
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
